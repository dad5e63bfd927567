/* test_prefix_cache.c - model-based fuzzing of the prefix cache: random
 * request streams (branching conversations, edits of earlier turns,
 * regenerations, exact repeats, interleaved users) served through the cache
 * and, as the reference, recomputed from scratch. Every logit row and every
 * greedy token must be bitwise equal, the byte budget never exceeded (with
 * KV pages and checkpoints shared between entries counted once, the running
 * figures checked against a recount after every request), and
 * (under ASan) nothing leaked. A second phase runs with a small memory
 * budget and a disk tier, restarts the cache over the same folder, and
 * corrupts files on disk (they must be removed, never trusted).
 * RW_PC_SEED / RW_PC_REQUESTS override the seed and the stream length. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pcache/pcache.h"
#include "sampler/sampler.h"
#include "harness.h"

static uint64_t rs;
static uint64_t rnd(void) {
    uint64_t z = (rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int64_t rint_(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

#define MAX_TOK 600
#define N_HIST 24
#define GEN 4

typedef struct {
    int32_t t[MAX_TOK];
    int64_t n;
} conv;

/* Runs one request: prompt p through the cache (c may be NULL: the
 * reference, from scratch), GEN greedy tokens; writes the GEN+1 logit rows
 * (after the prompt, after each generated token but the last... every row
 * that chose a token, plus the final one) and the generated ids. */
static bool serve(rw_model *m, rw_pcache *c, const conv *p, rw_threadpool *pool, float *rows, int32_t *gen,
                  rw_pcache_usage *u) {
    const int64_t V = rw_model_get_hparams(m)->n_vocab;
    rw_error err = {0};
    rw_model_seq *s = NULL;
    int64_t reused = 0;
    if (c) {
        CHECK_MSG(rw_pcache_acquire(c, p->t, p->n, pool, &s, &reused, rows, u, &err) == RW_OK, "%s", err.msg);
    } else {
        CHECK(rw_model_seq_new(m, RW_KV_F32, 0, &s, &err) == RW_OK);
    }
    if (!s) return false;
    CHECK_EQ_INT(rw_model_seq_length(s), reused);
    /* the rest of the prompt, in random chunks */
    for (int64_t at = reused; at < p->n;) {
        int64_t k = c ? rint_(1, p->n - at) : p->n - at;
        rw_forward_args a = {.tokens = p->t + at, .n = k, .logits = rows, .pool = pool};
        CHECK_MSG(rw_model_forward(m, s, &a, &err) == RW_OK, "%s", err.msg);
        at += k;
    }
    for (int g = 0; g < GEN; g++) {
        gen[g] = rw_argmax(rows + (int64_t)g * V, V);
        rw_forward_args a = {.tokens = &gen[g], .n = 1, .logits = rows + (int64_t)(g + 1) * V, .pool = pool};
        CHECK_MSG(rw_model_forward(m, s, &a, &err) == RW_OK, "%s", err.msg);
    }
    if (c) rw_pcache_insert(c, s, rows + (int64_t)GEN * V, p->n, rows);
    else rw_model_seq_free(s);
    return true;
}

static void next_request(conv *hist, int *n_hist, conv *out, int64_t V) {
    const int kind = (int)rint_(0, 5);
    if (*n_hist == 0 || kind == 0) { /* a new user: a fresh system prompt of some length */
        out->n = rint_(20, 300);
        for (int64_t i = 0; i < out->n; i++) out->t[i] = (int32_t)rint_(1, V - 1);
        /* half of them share the first system prompt */
        if (*n_hist && rint_(0, 1)) {
            const conv *h = &hist[0];
            int64_t k = h->n < out->n ? h->n : out->n;
            memcpy(out->t, h->t, (size_t)k * sizeof *out->t);
        }
    } else {
        const conv *h = &hist[rint_(0, *n_hist - 1)];
        *out = *h;
        if (kind == 1) {
            /* exact repeat */
        } else if (kind == 2 || kind == 3) { /* the conversation goes on: answer + new turn */
            int64_t add = rint_(1, 60);
            for (int64_t i = 0; i < add && out->n < MAX_TOK - GEN; i++) out->t[out->n++] = (int32_t)rint_(1, V - 1);
        } else { /* an edit of an earlier turn: cut, then new tokens */
            out->n = rint_(1, out->n);
            int64_t add = rint_(0, 40);
            for (int64_t i = 0; i < add && out->n < MAX_TOK - GEN; i++) out->t[out->n++] = (int32_t)rint_(1, V - 1);
            if (out->n == 0) out->t[out->n++] = 1;
        }
    }
    if (*n_hist < N_HIST) hist[(*n_hist)++] = *out;
    else hist[rint_(0, N_HIST - 1)] = *out;
}

static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) n += strstr(de->d_name, ".rwc") != NULL;
    if (d) closedir(d);
    return n;
}

static void corrupt_one(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!strstr(de->d_name, ".rwc")) continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        FILE *f = fopen(p, "r+b");
        if (f) {
            fseek(f, 200, SEEK_SET);
            fputc(0x5a, f);
            fclose(f);
        }
        break;
    }
    if (d) closedir(d);
}

static void run(const char *rel, int n_req, uint64_t seed, bool disk) {
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
    char dir[] = "/tmp/rw-pcache-XXXXXX";
    if (disk) CHECK(mkdtemp(dir) != NULL);
    /* budget: a few entries' worth in the disk phase, plenty otherwise */
    rw_model_seq *probe = NULL;
    CHECK(rw_model_seq_new(m, RW_KV_F32, 0, &probe, &err) == RW_OK);
    const size_t per = rw_model_seq_checkpoint_bytes(probe) * 3 + (size_t)300 * 16384 + (size_t)V * 4;
    rw_model_seq_free(probe);
    rw_pcache_config cfg = {.mem_bytes = disk ? per * 2 : (size_t)1 << 30, .dir = disk ? dir : NULL,
                            .dir_bytes = disk ? per * 6 : 0};
    rw_pcache *c = NULL;
    CHECK(rw_pcache_new(m, RW_KV_F32, 0, &cfg, &c, &err) == RW_OK);
    rs = seed;
    conv *hist = calloc(N_HIST, sizeof *hist), req;
    int n_hist = 0;
    float *a = malloc((size_t)(GEN + 1) * (size_t)V * sizeof *a), *b = malloc((size_t)(GEN + 1) * (size_t)V * sizeof *b);
    int32_t ga[GEN], gb[GEN];
    int64_t reused_total = 0, prompt_total = 0, disk_total = 0, full_hits = 0;
    int fails_before = rw_test_failures;
    for (int r = 0; r < n_req && rw_test_failures == fails_before; r++) {
        next_request(hist, &n_hist, &req, V);
        rw_pcache_usage u;
        if (disk && r == n_req / 2) { /* restart over the same folder, one file corrupted */
            rw_pcache_free(c);
            corrupt_one(dir);
            CHECK(rw_pcache_new(m, RW_KV_F32, 0, &cfg, &c, &err) == RW_OK);
        }
        serve(m, c, &req, pool, a, ga, &u);
        serve(m, NULL, &req, pool, b, gb, NULL);
        CHECK_MSG(!memcmp(ga, gb, sizeof ga) && !memcmp(a, b, (size_t)(GEN + 1) * (size_t)V * sizeof *a),
                  "%s request %d (%lld tokens, %lld from the cache): output differs from the reference", rel, r,
                  (long long)req.n, (long long)(u.from_memory + u.from_disk));
        CHECK_EQ_INT(u.from_memory + u.from_disk + u.recomputed, req.n);
        full_hits += u.recomputed == 0;
        reused_total += u.from_memory + u.from_disk, disk_total += u.from_disk, prompt_total += req.n;
        rw_pcache_stats st;
        rw_pcache_get_stats(c, &st);
        CHECK_MSG(st.bytes_kv_and_state + st.bytes_logits <= cfg.mem_bytes, "%s: memory tier over budget", rel);
        /* shared KV pages and checkpoints counted once: the running figures
         * equal a recount over every entry's blocks, never more than the
         * entries counted alone */
        CHECK_MSG(rw_pcache_check(c, &err) == RW_OK, "%s request %d: %s", rel, r, err.msg);
        CHECK(st.bytes_kv_and_state <= st.bytes_unshared);
        if (disk) CHECK_MSG(st.bytes_disk <= cfg.dir_bytes, "%s: disk tier over budget", rel);
    }
    rw_pcache_stats st;
    rw_pcache_get_stats(c, &st);
    printf("%-28s %s %d requests: %lld of %lld prompt tokens reused (%lld from disk), %lld with nothing recomputed, "
           "%llu evictions, %llu invalid files removed\n",
           rel, disk ? "disk" : "mem ", n_req, (long long)reused_total, (long long)prompt_total, (long long)disk_total,
           (long long)full_hits,
           (unsigned long long)st.evictions, (unsigned long long)st.disk_invalid);
    CHECK_MSG(reused_total > prompt_total / 4, "%s: the cache reused almost nothing", rel);
    if (!disk) CHECK_MSG(full_hits > 0, "%s: no exact repeat was served without computing", rel);
    rw_pcache_free(c);
    if (disk) {
        CHECK(count_files(dir) >= 0);
        DIR *d = opendir(dir);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            if (de->d_name[0] != '.') unlink(p);
        }
        if (d) closedir(d);
        rmdir(dir);
    }
    free(hist), free(a), free(b);
    rw_threadpool_free(pool);
    rw_model_free(m);
    rw_gguf_close(g);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    const char *e = getenv("RW_PC_SEED");
    const uint64_t seed = e ? strtoull(e, NULL, 10) : 77;
    e = getenv("RW_PC_REQUESTS");
    const int n_req = e ? atoi(e) : rw_test_sanitized() ? 12 : 50;
    static const char *models[] = {
        "llama/llama-F32.gguf",       "qwen3/qwen3-F32.gguf",         "qwen35/qwen35-F32.gguf",
        "qwen35moe/qwen35moe-F32.gguf", "qwen3next/qwen3next-F32.gguf", "granitehybrid/granitehybrid-Q8_0.gguf",
        "lfm2/lfm2-Q8_0.gguf",        "nemotron_h/nemotron_h-Q8_0.gguf",
        "gemma3/gemma3-Q8_0.gguf",    "gpt-oss/gpt-oss-MXFP4_MOE.gguf",
    };
    /* under the sanitizers (about ten times slower) a hybrid of each kind */
    const bool san = rw_test_sanitized();
    for (size_t i = 0; i < sizeof models / sizeof *models; i++)
        if (!san || strstr(models[i], "qwen35/") || strstr(models[i], "granitehybrid")) run(models[i], n_req, seed + i, false);
    run("qwen35/qwen35-F32.gguf", n_req, seed + 100, true);
    if (!san) run("granitehybrid/granitehybrid-F32.gguf", n_req, seed + 101, true);
    /* sliding-window layers: entries past their ring (runs of pages) on disk */
    if (!san) run("gemma3/gemma3-Q8_0.gguf", n_req, seed + 102, true);
    if (!san) run("gpt-oss/gpt-oss-MXFP4_MOE.gguf", n_req, seed + 103, true);
    return rw_test_done();
}
